"""Stage 3, grading: rubrics, reading grades out of judge replies, and judge runs."""

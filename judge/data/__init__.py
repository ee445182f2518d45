"""Stage 1, data: the item file format and the datasets held in the store."""

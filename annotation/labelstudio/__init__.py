"""Label Studio: its own server process (service), the only importer of label-studio-sdk
(client), labeling interfaces built from rubrics (interface), campaigns and pulling ratings
back (campaigns, pull)."""

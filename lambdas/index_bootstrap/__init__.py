"""Custom resource that puts the stored script, index templates and first index versions in place."""

"""Key conventions of the reference-data table: schemas, keys, sort-key strategies and item helpers."""

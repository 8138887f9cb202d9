"""OpenSearch side of the platform: signed transport, index naming and templates, documents."""

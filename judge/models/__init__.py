"""Model calls: the endpoint client (sole ``openai`` importer), the call cache, and the
embedded local model server."""

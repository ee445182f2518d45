"""Model calls: the endpoint client (sole ``openai`` importer), each endpoint's quota kept
across processes and machines (``limiter``), the call cache, and the embedded local model
server."""

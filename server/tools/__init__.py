"""What is run as a tool beside the server: the model builder (`python -m server` calls its
`prepare` to build the default model on first use) and the two benchmarks
(`python -m server.tools.model_builder|bench|engine_bench`)."""

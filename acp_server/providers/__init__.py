"""Model providers: plugins that turn one model request into a stream of chunks."""

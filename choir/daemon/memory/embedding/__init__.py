"""The embedding pipeline of §11.9: providers, queue, breaker and backoff, vectors written back."""

"""decide: batches of related decision questions about documents, answered by diffusion LMs."""

__version__ = "0.1.0"

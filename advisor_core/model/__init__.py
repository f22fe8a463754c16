"""The normalised model: a run made of ranks, metadata records and tables on demand."""

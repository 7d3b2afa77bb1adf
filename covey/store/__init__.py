"""The Redis-backed records beside the ledger: the job's tree, checkpoints and workspace."""

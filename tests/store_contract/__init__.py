"""The state store contract: behaviours every StateStore keeps, run against each store."""

"""The cluster contract: behaviours the product relies on, run against every Cluster."""

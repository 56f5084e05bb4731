"""Tests of reconciler.lifecycle: observing, planning and carrying out L1-L11 through a Cluster."""

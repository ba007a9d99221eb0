"""Evaluation: datasets (BEIR layout, the demo set), metrics, the harness and its reports."""

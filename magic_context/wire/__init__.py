"""Wire formats: the canonical message model, one codec per harness format, recorded-session importers."""

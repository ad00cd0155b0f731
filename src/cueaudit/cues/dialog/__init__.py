"""Dialog-history cues: PRISM and Community Alignment (CAD) loaders, clusters and prefixes."""

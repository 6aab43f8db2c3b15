# shared helpers

"""Examples of rules whose VALID and INVALID cases outgrow the rule module: one module per rule,
imported by the rule, which declares them as its own."""

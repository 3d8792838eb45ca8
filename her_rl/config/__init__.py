"""The config: composing and checking it once (checks, schema), the registry of names, the algo
configs made from the learner classes (store), the overrides and the bookkeeping keys."""

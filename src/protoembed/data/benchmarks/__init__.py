"""The benchmark readers the evaluation tasks' entries call: STS (:mod:`.sts`), the SentEval transfer tasks
(:mod:`.transfer`) and the short-text clustering sets (:mod:`.clustering`)."""

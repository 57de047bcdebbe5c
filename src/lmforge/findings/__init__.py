"""The findings report (issue 28): each claim of the course material, the experiment that tests it,
its numbers with their intervals, one figure and a verdict computed by a rule in code
(`claims.CLAIMS`, one registry entry per claim)."""

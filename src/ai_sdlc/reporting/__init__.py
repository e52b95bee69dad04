"""The run report: `data` gathers what a run did from its record and the stories' ledgers;
`html` renders it as one self-contained page."""

"""The one owner of story state.

Every change to a story's workflow state (begin an action, count a recovery, block, finish a
phase, approve, unblock, restore) is a named operation of `transitions.StoryState` (built on
`txn`, the transaction, and `steps`, its building blocks): one locked transaction that writes
`story.md`, the hash-chained ledger (`ledger`, mirrored by `anchor`) and its event (`events`).
`guard` routes provider retries into that counter, `checkpoint` rolls a killed phase back,
`runlock` keeps one run per story.
"""

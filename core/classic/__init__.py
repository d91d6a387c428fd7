"""The classic consumer group (Kafka's ``ClassicGroup``, the JoinGroup/SyncGroup protocol):
its data (``model``), the copy-on-write draft of one step (``draft``), its states and their
table (``states``), the machine that alone changes a group (``machine``, with ``joining`` and
``membership``) and the embedded subscription and assignment bytes (``subscription``).

What every protocol shares stays in ``groupcoord.core``: routing, offsets, writes and their
undo, load and unload, events, commands, errors, config. A second protocol (KIP-848's
consumer groups) goes in a sibling package, ``groupcoord.core.consumer``, its groups kept in
the same store by group id, each group answering ListGroups and DescribeGroups as its kind.
"""

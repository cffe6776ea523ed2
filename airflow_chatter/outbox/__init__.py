"""The write side: the Outbox Document's shape, item ids, partition keys, its contract and its Kafka mapping."""

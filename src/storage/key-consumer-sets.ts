// The two sets that tie a key to every consumer it was ever in, which reports read to find the key's ledger days
// under each (a request of a key with a consumer is counted in the consumer's slot, by the limit script, which writes
// no set). The key's set is in its slot, the consumer's in the consumer's: two commands, the key's first (reading a
// key's ledger starts from it). Written by the key store before a record names a consumer, and by the usage ledger
// with counts an instance writes under one; both idempotent.
import type { Keyspace } from './keyspace.js';
import type { RedisCommands } from './redis.js';

export async function recordKeyConsumer(redis: Pick<RedisCommands, 'sadd'>, ks: Keyspace, keyId: string, consumerId: string): Promise<void> {
  await redis.sadd(ks.keyConsumers(keyId), consumerId);
  await redis.sadd(ks.consumerUsageKeys(consumerId), keyId);
}

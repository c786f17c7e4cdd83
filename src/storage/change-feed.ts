// A change feed: one pub/sub channel an instance listens on to drop its cached copies of records another instance
// changed (keys:events, consumers:events). Written once, so every feed starts over the same way after a reconnect.
import type { RedisConnection, RedisSubscriber } from './redis.js';

export interface ChannelListeners {
  /** Each message published on the channel. */
  onMessage(message: string): void;
  /** After a reconnect: messages sent meanwhile are lost, so whatever the feed keeps current must start over. */
  onReset(): void;
  /** Each time the subscription is in place (first, and again after every reconnect): from then on nothing is missed. */
  onListening?(): void;
}

/**
 * Listens on `channel` on a subscriber connection of its own; the returned subscriber is what to disconnect. Not
 * awaited: Redis may be down at start-up; ioredis subscribes once connected (and again after every reconnect), and
 * the caches' TTLs bound staleness meanwhile.
 */
export function listenOn(redis: Pick<RedisConnection, 'subscriber'>, channel: string, l: ChannelListeners): RedisSubscriber {
  const sub = redis.subscriber();
  let connectedOnce = false;
  // Resolves once Redis has confirmed the subscription: from then on no message is missed (until a reconnect).
  const listen = (): void => {
    sub.subscribe(channel).then(
      () => l.onListening?.(),
      () => {},
    );
  };
  sub.on('ready', () => {
    if (connectedOnce) {
      l.onReset();
      // ioredis subscribes again by itself; this SUBSCRIBE (a no-op for Redis) tells us when that is in place.
      listen();
    }
    connectedOnce = true;
  });
  sub.on('message', (from: string, message: string) => {
    if (from === channel) l.onMessage(message);
  });
  listen();
  return sub;
}

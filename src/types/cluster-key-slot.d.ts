// Types for cluster-key-slot (it ships none): the hash slot of a Redis key, honouring its {hash tag}.
declare module 'cluster-key-slot' {
  /** The slot (0-16383) Redis Cluster stores this key in. */
  export default function calculateSlot(key: string | Buffer): number;
}

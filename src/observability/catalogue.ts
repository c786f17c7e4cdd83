// The diagnostics_channel catalogue: the names of the facts one room publishes for whichever other room wants them
// (the events producer, a test, an operator's own subscriber), and the shape of each message. Plain data with
// primitive fields, so observability/ needs no import from the rooms that publish: the limits decision, consumer
// administration and the route policy each map their own types into these. A publisher checks `hasSubscribers`
// first, so a fact nobody listens to costs nothing beyond that check.
import { channel, type Channel } from 'node:diagnostics_channel';

export const CHANNELS = {
  /** Every limit decision of a key (published by limits/key-limits.ts when the decision is in hand). */
  decided: 'tollgate:limits.decided',
  /** A ban started: derived by subscribers from `decided` (outcome banned_now); nothing publishes it separately. */
  keyBanned: 'tollgate:key.banned',
  /** A consumer's status changed (suspended, active again) or it was deleted (consumers/admin.ts). */
  consumerChanged: 'tollgate:consumer.changed',
  /** A keyed request to a deprecated route or operation (pipeline/stages/policy.ts, where its headers are set). */
  deprecatedCalled: 'tollgate:deprecated.called',
} as const;

export type ChannelName = (typeof CHANNELS)[keyof typeof CHANNELS];

/** limits/types.ts's Outcome, spelt out here so this room need not import the limits. */
export type DecidedOutcome = 'admitted' | 'limited' | 'banned' | 'banned_now' | 'invalid_key' | 'invalid_record';

/** One window of a decision as it stands after it. */
export interface DecidedWindow {
  /** The window's name: "minute", "day", "month", "<route>:day", "key:day" (a key's cap inside its consumer's pool). */
  name: string;
  limit: number;
  /** Points taken in the window after the decision (an admitted request's cost included). */
  used: number;
  /** Milliseconds until the window ends. */
  resetMs: number;
  mode: 'enforce' | 'shadow';
  /** A monthly window: when its period ends (epoch ms, the gateway's clock). */
  endsAt?: number;
  /** A monthly window: its period's first day (YYYY-MM-DD), the name of its counter. */
  period?: string;
  /** Its length (a monthly window's: the time left in its period). */
  lengthMs: number;
  /** A key's own cap inside its consumer's pool: counted under the key, not the pool. */
  cap?: true;
}

export interface DecidedMessage {
  keyId: string;
  /** The consumer whose pool counted the request, if the key has one. */
  consumer?: string;
  /** The plan in force (the consumer's for a key of one). */
  plan: string;
  outcome: DecidedOutcome;
  cost: number;
  windows: readonly DecidedWindow[];
  /** Candidate limits (shadow), each checked on windows[of]'s count. */
  candidates: ReadonlyArray<{ name: string; limit: number; of: number }>;
  /** Bit i: window i lacked the cost; bit windows.length + j: candidate j would have refused (limits/types.ts Decision.short). */
  short: number;
  banLevel: number;
  retryMs: number;
  /** The gateway's clock when the decision was made (ms). */
  at: number;
  /**
   * true: the shared store (Redis) decided, atomically for the whole fleet; false: this instance's memory (no Redis, a
   * Redis outage with failMode open, or a ban this instance remembered). Only shared decisions say which one request
   * crossed a threshold.
   */
  shared: boolean;
}

export interface ConsumerChangedMessage {
  consumer: string;
  status: 'active' | 'suspended' | 'deleted';
  reason?: string;
  at: number;
}

export interface DeprecatedCalledMessage {
  keyId: string;
  consumer?: string;
  /** The operationId when the route came from an OpenAPI operation that has one, else "METHOD /path". */
  operation: string;
  /** The route as the usage report names it: "METHOD /pattern". */
  route: string;
  /** The route's sunset (ISO 8601), if it has one. */
  sunset?: string;
  /** Where callers should move (the Link rel="successor-version" target), if the route names one. */
  successor?: string;
  at: number;
}

/** Each channel's message type. */
export interface ChannelMessages {
  [CHANNELS.decided]: DecidedMessage;
  [CHANNELS.keyBanned]: DecidedMessage;
  [CHANNELS.consumerChanged]: ConsumerChangedMessage;
  [CHANNELS.deprecatedCalled]: DeprecatedCalledMessage;
}

/**
 * The channel of a name (node:diagnostics_channel keeps one object per name, so this is the same object everywhere).
 * Publishers keep it in a module constant and test `hasSubscribers` before building a message.
 */
export function catalogueChannel(name: ChannelName): Channel {
  return channel(name);
}

/**
 * The event types the events producer makes of these facts (src/events/), listed here, below both the config (a
 * webhook's `types`) and the events room, so each reads the one list.
 */
export const EVENT_TYPES = ['quota.threshold', 'quota.shadow_threshold', 'key.banned', 'consumer.suspended', 'deprecated.called', 'key.expiring'] as const;

export type EventType = (typeof EVENT_TYPES)[number];

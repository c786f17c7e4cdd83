// Signing a delivery the Standard Webhooks way, with its reference library: webhook-id (the CloudEvent's id),
// webhook-timestamp (the attempt's time, unix seconds) and webhook-signature: `v1,<base64 HMAC-SHA256>` of
// "<id>.<timestamp>.<body>" per active secret, space-separated, so a receiver in the middle of a secret rotation
// verifies with either secret.
import { Webhook } from 'standardwebhooks';

export interface SignatureHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

export class WebhookSigner {
  private readonly signers: readonly Webhook[];

  /** `secrets`: whsec_ secrets (config/sections/events.ts checks them), the one in use first during a rotation. */
  constructor(secrets: readonly string[]) {
    if (secrets.length === 0) throw new Error('a webhook signer needs at least one secret');
    this.signers = secrets.map((s) => new Webhook(s));
  }

  /** The headers of one attempt to deliver `body` (the exact bytes sent) as event `id` at `at`. */
  headers(id: string, body: string, at: Date): SignatureHeaders {
    // The timestamp the signature covers is whole seconds: sign with the same instant the header states.
    const seconds = Math.floor(at.getTime() / 1000);
    const signedAt = new Date(seconds * 1000);
    return {
      'webhook-id': id,
      'webhook-timestamp': String(seconds),
      'webhook-signature': this.signers.map((w) => w.sign(id, signedAt, body)).join(' '),
    };
  }
}

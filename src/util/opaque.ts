// Opaque tokens handed to API clients (page cursors): JSON in base64url, read back as an object of fields or nothing.
// Callers check each field and that the token is the one they would have written (a client cannot forge a variant).

/** `fields` as a token: JSON, base64url. */
export function encodeOpaque(fields: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(fields)).toString('base64url');
}

/** The fields of a token encodeOpaque wrote, or undefined for anything that is not a JSON object in base64url. */
export function decodeOpaque(text: string): Record<string, unknown> | undefined {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

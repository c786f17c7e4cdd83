// The certificate and key files the config names (server.tls, admin.tls, ops.tls, portal.tls, services.<name>.tls), read and
// checked in one place. Loading a config reads them all, so a missing, unreadable or non-PEM file, or a key that does
// not belong to its certificate, is a config error naming the field (config check, start, reload), never a crash
// when a listener or a target first needs them. The listeners and targets read them again through the same functions
// on every reload: that is how a rotated certificate is picked up.
import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Config, ListenerTlsConfig, ServiceTlsConfig } from './schema.js';

export type TlsRead<T> = { ok: true; value: T } | { ok: false; error: string };

/** What a TLS listener is built with (https.createServer / setSecureContext). */
export interface ListenerTlsMaterial {
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
  /** With a CA: every client must present a certificate it signed. */
  requestCert: boolean;
  rejectUnauthorized: boolean;
  minVersion: 'TLSv1.2' | 'TLSv1.3';
}

/** What the gateway's connections to a service's targets are made with (https.Agent, the health checks). */
export interface TargetTlsMaterial {
  options: { ca: Buffer; cert?: Buffer; key?: Buffer; servername?: string; rejectUnauthorized: boolean };
  /** Changes whenever the files' content or the settings do: a reload rebuilds a target's pool only then. */
  id: string;
}

const ERRNO: Record<string, string> = { ENOENT: 'file not found', EACCES: 'permission denied', EISDIR: 'is a directory, not a file' };

function readFile(field: string, path: string): TlsRead<Buffer> {
  try {
    return { ok: true, value: readFileSync(path) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    return { ok: false, error: `${field}: cannot read ${JSON.stringify(path)}: ${ERRNO[code] ?? (code || 'unreadable')}` };
  }
}

/** Certificates in a PEM file: the first parsed, the count checked (a CA bundle may hold several). */
function readCertificates(field: string, path: string): TlsRead<{ pem: Buffer; first: X509Certificate }> {
  const file = readFile(field, path);
  if (!file.ok) return file;
  const text = file.value.toString('latin1');
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) return { ok: false, error: `${field}: ${JSON.stringify(path)} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)` };
  const parsed: X509Certificate[] = [];
  for (const block of blocks) {
    try {
      parsed.push(new X509Certificate(block));
    } catch {
      return { ok: false, error: `${field}: ${JSON.stringify(path)} holds a PEM certificate that does not parse` };
    }
  }
  return { ok: true, value: { pem: file.value, first: parsed[0]! } };
}

function readKey(field: string, path: string): TlsRead<{ pem: Buffer; key: KeyObject }> {
  const file = readFile(field, path);
  if (!file.ok) return file;
  if (!/-----BEGIN (RSA |EC |ENCRYPTED )?PRIVATE KEY-----/.test(file.value.toString('latin1')))
    return { ok: false, error: `${field}: ${JSON.stringify(path)} holds no PEM private key (expected -----BEGIN PRIVATE KEY-----)` };
  try {
    return { ok: true, value: { pem: file.value, key: createPrivateKey(file.value) } };
  } catch (err) {
    const encrypted = /passphrase/i.test((err as Error).message);
    return { ok: false, error: `${field}: ${JSON.stringify(path)}: ${encrypted ? 'the key is encrypted; give an unencrypted one' : 'the private key does not parse'}` };
  }
}

/** A certificate and its key, both readable, and the key the certificate's own. */
function readPair(prefix: string, certFile: string, keyFile: string): TlsRead<{ cert: Buffer; key: Buffer }> {
  const cert = readCertificates(`${prefix}.certFile`, certFile);
  if (!cert.ok) return cert;
  const key = readKey(`${prefix}.keyFile`, keyFile);
  if (!key.ok) return key;
  if (!cert.value.first.checkPrivateKey(key.value.key))
    return { ok: false, error: `${prefix}.keyFile: ${JSON.stringify(keyFile)} is not the private key of the certificate in ${prefix}.certFile` };
  return { ok: true, value: { cert: cert.value.pem, key: key.value.pem } };
}

/** A listener's TLS block read from disk; `prefix` names it in errors (server.tls). */
export function readListenerTls(prefix: string, tls: ListenerTlsConfig): TlsRead<ListenerTlsMaterial> {
  const pair = readPair(prefix, tls.certFile, tls.keyFile);
  if (!pair.ok) return pair;
  let ca: Buffer | undefined;
  if (tls.caFile !== undefined) {
    const read = readCertificates(`${prefix}.caFile`, tls.caFile);
    if (!read.ok) return read;
    ca = read.value.pem;
  }
  return {
    ok: true,
    value: { ...pair.value, ...(ca ? { ca } : {}), requestCert: ca !== undefined, rejectUnauthorized: ca !== undefined, minVersion: tls.minVersion },
  };
}

/** A service's TLS block read from disk; `prefix` names it in errors (services.orders.tls). */
export function readTargetTls(prefix: string, tls: ServiceTlsConfig): TlsRead<TargetTlsMaterial> {
  const ca = readCertificates(`${prefix}.caFile`, tls.caFile);
  if (!ca.ok) return ca;
  let pair: { cert: Buffer; key: Buffer } | undefined;
  if (tls.certFile !== undefined && tls.keyFile !== undefined) {
    const read = readPair(prefix, tls.certFile, tls.keyFile);
    if (!read.ok) return read;
    pair = read.value;
  }
  const options = { ca: ca.value.pem, ...(pair ?? {}), ...(tls.servername ? { servername: tls.servername } : {}), rejectUnauthorized: tls.verify };
  const hash = createHash('sha256');
  for (const part of [options.ca, pair?.cert, pair?.key, tls.servername, String(tls.verify)]) hash.update(part ?? '-').update('\0');
  return { ok: true, value: { options, id: hash.digest('hex') } };
}

/** Every TLS block of a config, as ["server.tls", block] pairs. */
function listenerBlocks(config: Config): Array<[string, ListenerTlsConfig]> {
  const out: Array<[string, ListenerTlsConfig]> = [];
  if (config.server.tls) out.push(['server.tls', config.server.tls]);
  if (config.admin.tls) out.push(['admin.tls', config.admin.tls]);
  if (config.ops?.tls) out.push(['ops.tls', config.ops.tls]);
  if (config.portal.tls) out.push(['portal.tls', config.portal.tls]);
  return out;
}

/** One error line per TLS block whose files cannot be used (the first problem of each block). */
export function tlsFileErrors(config: Config): string[] {
  const errors: string[] = [];
  for (const [prefix, block] of listenerBlocks(config)) {
    const r = readListenerTls(prefix, block);
    if (!r.ok) errors.push(r.error);
  }
  for (const [name, s] of Object.entries(config.services ?? {})) {
    if (!s.tls) continue;
    const r = readTargetTls(`services.${name}.tls`, s.tls);
    if (!r.ok) errors.push(r.error);
  }
  return errors;
}

/** What is allowed but unusual: said at start-up and by config check, never refused. */
export function tlsWarnings(config: Config, now = Date.now()): string[] {
  const out: string[] = [];
  for (const [name, s] of Object.entries(config.services ?? {})) {
    if (s.tls && !s.tls.verify)
      out.push(`services.${name}.tls.verify is false: the gateway accepts any certificate from ${name}'s targets, so anyone on the path can pose as them`);
  }
  for (const [prefix, block] of listenerBlocks(config)) {
    const cert = readCertificates(`${prefix}.certFile`, block.certFile);
    if (cert.ok && Date.parse(cert.value.first.validTo) < now) out.push(`${prefix}.certFile: the certificate expired on ${cert.value.first.validTo}; clients will refuse it`);
  }
  return out;
}

// Certificates for TLS tests, made with openssl in a temporary directory: a CA, a server certificate for 127.0.0.1
// and localhost signed by it, and a second CA that signed nothing (a client trusting it must refuse the server).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificates {
  dir: string;
  caFile: string;
  otherCaFile: string;
  certFile: string;
  keyFile: string;
  remove(): void;
}

export function makeCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-tls-'));
  const f = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe', timeout: 20_000 });
  for (const ca of ['ca', 'other-ca']) {
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=Tollgate test ${ca}`,
      '-keyout',
      f(`${ca}.key`),
      '-out',
      f(`${ca}.crt`),
    );
  }
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', f('server.key'), '-out', f('server.csr'));
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl(
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.crt'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    f('server.ext'),
    '-out',
    f('server.crt'),
  );
  return {
    dir,
    caFile: f('ca.crt'),
    otherCaFile: f('other-ca.crt'),
    certFile: f('server.crt'),
    keyFile: f('server.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

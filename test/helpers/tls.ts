// Certificates for TLS tests, made with openssl in a temporary directory: a CA, a server certificate for 127.0.0.1
// and localhost signed by it, a client certificate signed by it (mutual TLS), and a second CA that signed nothing
// but what `issue` asks of it (a client trusting the first CA must refuse a server certificate from the second).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface IssuedCertificate {
  certFile: string;
  keyFile: string;
}

export interface TestCertificates {
  dir: string;
  caFile: string;
  otherCaFile: string;
  /** The server certificate (IP:127.0.0.1, DNS:localhost), signed by caFile's CA. */
  certFile: string;
  keyFile: string;
  /** A client certificate (CN=tollgate-test-client, extendedKeyUsage clientAuth), signed by caFile's CA. */
  clientCertFile: string;
  clientKeyFile: string;
  /** Another certificate: `name` is its file name stem; `san` its subjectAltName; `ca` which CA signs it. */
  issue(name: string, opts?: { ca?: 'ca' | 'other-ca'; san?: string; cn?: string; client?: boolean }): IssuedCertificate;
  /** A self-signed certificate for localhost that expired on 2020-01-02 (`openssl ca`, which takes an end date). */
  expired(name: string): IssuedCertificate;
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
  const issue: TestCertificates['issue'] = (name, opts = {}) => {
    const ca = opts.ca ?? 'ca';
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${opts.cn ?? 'localhost'}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`));
    const ext = opts.client ? 'extendedKeyUsage=clientAuth\n' : `subjectAltName=${opts.san ?? 'IP:127.0.0.1,DNS:localhost'}\n`;
    writeFileSync(f(`${name}.ext`), ext);
    // A random serial per certificate (-CAcreateserial would count up from one file): rotations get serials of their own.
    const serial = `0x${[...Array(16)].map(() => Math.floor(Math.random() * 16).toString(16)).join('')}`;
    openssl(
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f(`${ca}.crt`),
      '-CAkey',
      f(`${ca}.key`),
      '-set_serial',
      serial,
      '-days',
      '2',
      '-extfile',
      f(`${name}.ext`),
      '-out',
      f(`${name}.crt`),
    );
    return { certFile: f(`${name}.crt`), keyFile: f(`${name}.key`) };
  };
  const expired: TestCertificates['expired'] = (name) => {
    const db = f(`${name}-db`);
    mkdirSync(db);
    writeFileSync(join(db, 'index.txt'), '');
    writeFileSync(join(db, 'serial'), '01\n');
    const cnf = join(db, 'ca.cnf');
    writeFileSync(
      cnf,
      `[ca]\ndefault_ca = d\n[d]\ndatabase = ${db}/index.txt\nnew_certs_dir = ${db}\nserial = ${db}/serial\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n`,
    );
    openssl('req', '-new', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`));
    // prettier-ignore
    openssl('ca', '-batch', '-config', cnf, '-selfsign', '-notext', '-keyfile', f(`${name}.key`), '-in', f(`${name}.csr`), '-out', f(`${name}.crt`), '-startdate', '20200101000000Z', '-enddate', '20200102000000Z');
    return { certFile: f(`${name}.crt`), keyFile: f(`${name}.key`) };
  };
  const server = issue('server');
  const client = issue('client', { cn: 'tollgate-test-client', client: true });
  return {
    dir,
    caFile: f('ca.crt'),
    otherCaFile: f('other-ca.crt'),
    certFile: server.certFile,
    keyFile: server.keyFile,
    clientCertFile: client.certFile,
    clientKeyFile: client.keyFile,
    issue,
    expired,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

// The tls block of the gateway's own listeners (server.tls, ops.tls, admin.tls): one shape for the three, so a
// certificate is configured, reloaded and checked the same way whichever port it serves.
import { z } from 'zod';

/**
 * HTTPS on a listener (server, admin, ops): its certificate and key, and with caFile, mutual TLS: every client must
 * present a certificate that CA signed. The files are read when the config is loaded (src/config/tls-files.ts) and
 * again on every reload, so a rotated certificate is picked up without dropping a connection.
 */
export const listenerTls = z.strictObject({
  certFile: z.string().min(1).describe('PEM file of the listener\'s certificate (and any intermediates after it).'),
  keyFile: z.string().min(1).describe('PEM file of the certificate\'s private key (unencrypted).'),
  caFile: z.string().min(1).optional().describe('PEM file of the CA certificate(s) clients\' certificates must be signed by: set, every client must present one (mutual TLS); a client without one is refused during the handshake.'),
  minVersion: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2').describe('The oldest TLS version accepted: TLSv1.2 or TLSv1.3.'),
});

export type ListenerTlsConfig = z.output<typeof listenerTls>;

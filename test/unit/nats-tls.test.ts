import { describe, expect, it } from 'vitest';
import { tlsFailure, wantsTls } from '../../src/nats-tls.js';

/** An error as Node's TLS layer builds it: a message and a code (and OpenSSL's reason). */
const nodeError = (message: string, code: string, reason?: string): Error =>
  Object.assign(new Error(message), { code, ...(reason !== undefined && { reason }) });

describe('wantsTls', () => {
  it('is true when any server of the list is tls://', () => {
    expect(wantsTls('tls://a:4222')).toBe(true);
    expect(wantsTls('nats://a:4222, TLS://b:4222')).toBe(true);
    expect(wantsTls('nats://a:4222,b:4222')).toBe(false);
  });
});

describe('tlsFailure', () => {
  it('says an untrusted server certificate needs SONAR_NATS_TLS_CA', () => {
    const err = nodeError(
      'unable to verify the first certificate',
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    );
    expect(tlsFailure(err)).toBe(
      "TLS: the server's certificate is not trusted (unable to verify the first certificate): set SONAR_NATS_TLS_CA to the CA that signed it",
    );
  });

  it("turns OpenSSL's multi-line alert into one line naming the client certificate settings", () => {
    const openssl =
      '80EC1001117F0000:error:0A000412:SSL routines:ssl3_read_bytes:sslv3 alert bad certificate:' +
      '../deps/openssl/openssl/ssl/record/rec_layer_s3.c:1601:SSL alert number 42\n';
    const err = new Error('connection failed', {
      cause: nodeError(
        openssl,
        'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
        'sslv3 alert bad certificate',
      ),
    });
    const line = tlsFailure(err)!;
    expect(line).not.toContain('\n');
    expect(line).toContain('(sslv3 alert bad certificate)');
    expect(line).toContain('SONAR_NATS_TLS_CERT and SONAR_NATS_TLS_KEY');
  });

  it('leaves other failures alone', () => {
    expect(tlsFailure(nodeError('connect ECONNREFUSED 127.0.0.1:4222', 'ECONNREFUSED'))).toBe(
      undefined,
    );
    expect(tlsFailure('not an error')).toBe(undefined);
  });
});

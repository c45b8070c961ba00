import { createHash } from 'node:crypto';

/** A static asset served from memory, its ETag the hash of its text. */
export interface Asset {
  text: string;
  etag: string;
}

export const asset = (text: string): Asset => ({
  text,
  etag: `"${createHash('sha256').update(text).digest('base64url').slice(0, 16)}"`,
});

/**
 * docs/compatibility.md's table says which versions this package speaks; this keeps it true
 * when the package version, the contract version, the event envelope or the snapshot format
 * moves, and keeps the changelog and the links to both in place.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EVENT_VERSION } from '../../actors/events.js';
import { READABLE_FORMATS, SNAPSHOT_FORMAT } from '../../src/backend/snapshots/snapshot-codec.js';
import { HELP_FOOTER } from '../../src/cli/help.js';

const read = (path: string): string =>
  readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const pkg = JSON.parse(read('package.json')) as {
  version: string;
  engines: { node: string };
  files: string[];
};

describe('docs/compatibility.md', () => {
  const doc = read('docs/compatibility.md');
  const [major, minor] = pkg.version.split('.');
  const row = doc.split('\n').find((l) => l.startsWith(`| ${major}.${minor}.x `));

  it("has a row for this package's version with its contract, envelope, snapshot and Node", () => {
    expect(row, `no row "| ${major}.${minor}.x |" in the table`).toBeDefined();
    const contract = /contract version (\d+)/.exec(HELP_FOOTER)![1]!;
    const cells = row!.split('|').map((c) => c.trim());
    expect(cells[2]).toMatch(new RegExp(`^${contract}\\b`));
    expect(cells[3]).toBe(`envelope \`"v":${EVENT_VERSION}\``);
    const readable = [...READABLE_FORMATS].sort((a, b) => a - b);
    expect(readable.at(-1)).toBe(SNAPSHOT_FORMAT);
    expect(cells[4]).toBe(
      `writes format ${SNAPSHOT_FORMAT}, reads formats ${readable[0]} to ${SNAPSHOT_FORMAT}`,
    );
    expect(cells[5]!.replaceAll(' ', '')).toBe(pkg.engines.node);
  });

  it('is linked from the README and docs/contract.md, as is the changelog', () => {
    const readme = read('README.md');
    expect(readme).toContain('](docs/compatibility.md)');
    expect(readme).toContain('](CHANGELOG.md)');
    const contract = read('docs/contract.md');
    expect(contract).toContain('](compatibility.md)');
    expect(contract).toContain('](../CHANGELOG.md)');
  });
});

describe('CHANGELOG.md', () => {
  const changelog = read('CHANGELOG.md');

  it('is Keep a Changelog: an Unreleased section or one for this version, first', () => {
    const first = /^## (.+)$/m.exec(changelog)?.[1];
    expect(['[Unreleased]', `[${pkg.version}]`]).toContain(first?.split(' - ')[0]);
    for (const heading of /^### (.+)$/gm[Symbol.matchAll](changelog)) {
      expect(['Added', 'Changed', 'Deprecated', 'Removed', 'Fixed', 'Security']).toContain(
        heading[1],
      );
    }
  });

  it('ships in the package', () => {
    expect(pkg.files).toContain('CHANGELOG.md');
  });
});

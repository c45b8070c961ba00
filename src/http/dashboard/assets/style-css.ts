import { asset } from './asset.js';

/** The dashboard's stylesheet, served as `/assets/style.css` (no inline styles: see CSP). */
const source = String.raw`
:root {
  --bg: #f6f7f9; --fg: #1d2330; --muted: #6b7280; --line: #e3e6eb; --card: #fff;
  --ok: #1a7f37; --warn: #b26b00; --bad: #c62828; --info: #1f6feb; --pub: #8250df;
  font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; font-size: 14px;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); }
header { display: flex; align-items: center; gap: 24px; padding: 10px 24px; background: #111827; color: #fff; }
header a { color: #cbd5e1; text-decoration: none; margin-right: 16px; }
header a.active, header a:hover { color: #fff; }
header .brand { font-weight: 700; color: #fff; font-size: 16px; }
header form { margin-left: 8px; }
.live { margin-left: auto; font-size: 12px; color: #9ca3af; }
.live.on::before { content: '● '; color: #22c55e; }
.live.off::before { content: '● '; color: #f59e0b; }
button.link { background: none; border: 0; color: #cbd5e1; cursor: pointer; }
main { padding: 16px 24px 48px; max-width: 1400px; }
h1 { font-size: 20px; display: flex; align-items: center; gap: 10px; flex-wrap: wrap; }
h2 { font-size: 16px; margin-top: 28px; }
h3 { font-size: 14px; margin: 0 0 6px; }
a { color: var(--info); }
.muted { color: var(--muted); }
.warn { color: var(--warn); }
.mono, code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
pre.error { white-space: pre-wrap; word-break: break-word; color: var(--bad); background: #fff5f5; padding: 8px; border-radius: 4px; margin: 4px 0; }
table { border-collapse: collapse; width: 100%; background: var(--card); border: 1px solid var(--line); }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.detail { max-width: 480px; word-break: break-word; }
table.kv { width: auto; min-width: 480px; }
table.kv th { width: 140px; }
tr.ineligible td { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: 12px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; }
.card h3 { color: var(--muted); font-weight: 600; font-size: 12px; }
.card p { margin: 0; }
.card .big { font-size: 26px; font-weight: 600; }
.card.alert { border-color: var(--bad); }
.card.alert .big a { color: var(--bad); }
.tag { display: inline-block; background: #eef2ff; color: #3730a3; border-radius: 3px; padding: 0 6px; font-size: 12px; }
.badge, .count-chip { display: inline-block; border-radius: 10px; padding: 1px 8px; font-size: 12px; background: #e5e7eb; color: #374151; white-space: nowrap; }
.count-chip.delayed { background: #fef9c3; color: #854d0e; }
.st-Succeeded, .st-Active, [class*="st-"][class*="Succeeded"], [class*="Finalized"], [class*="Joined"], [class*="Ready"], [class*="Served"] { background: #dcfce7; color: var(--ok); }
.st-Running, [class*="Started"] { background: #dbeafe; color: #1d4ed8; }
.st-Published, [class*="Published"] { background: #f3e8ff; color: var(--pub); }
.st-Finalizing, [class*="Accepted"] { background: #e0f2fe; color: #0369a1; }
.st-Draining, .st-Blocked, .st-Waiting, [class*="Requeued"], [class*="Starved"], [class*="Retried"], [class*="Draining"] { background: #fef3c7; color: var(--warn); }
.st-Failed, .st-Dead, .st-Poisoned, .st-Cancelled, .st-Lost, .st-Skipped, [class*="Failed"], [class*="Dead"], [class*="Poisoned"], [class*="Cancelled"], [class*="Lost"], [class*="Skipped"] { background: #fee2e2; color: var(--bad); }
.badge.starved { background: #fee2e2; color: var(--bad); }
.count { background: var(--bad); color: #fff; border-radius: 8px; padding: 0 6px; font-size: 11px; }
section.starved { background: #fff5f5; border: 1px solid var(--bad); border-radius: 6px; padding: 8px 16px; margin-top: 16px; }
section.starved h2 { color: var(--bad); margin-top: 4px; }
.bars { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; }
.bar-row { display: grid; grid-template-columns: 140px 1fr 340px; align-items: center; gap: 12px; margin: 6px 0; }
.bar-label { font-weight: 600; }
svg.bar { width: 100%; height: 14px; }
.bar-bg { fill: #f1f5f9; }
.bar-running { fill: #2563eb; }
.bar-published { fill: #a855f7; }
.bar-free { fill: #86efac; }
.bar-figures { font-size: 12px; color: var(--muted); }
b.running { color: #2563eb; } b.published { color: #a855f7; } b.free { color: var(--ok); }
.progress-cell { display: flex; align-items: center; gap: 8px; min-width: 220px; }
svg.progress { width: 160px; height: 8px; }
.big-progress svg.progress { width: 360px; height: 12px; }
.progress-bg { fill: #e5e7eb; }
.progress-fg { fill: var(--ok); }
.scroll { overflow-x: auto; background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
svg.dag .edge { fill: none; stroke: #94a3b8; stroke-width: 1.5; marker-end: url(#arrow); }
svg.dag .arrow { fill: #94a3b8; }
svg.dag .node rect:first-of-type { fill: #fff; stroke: #94a3b8; stroke-width: 1.5; }
svg.dag .node.st-Succeeded rect:first-of-type { stroke: var(--ok); fill: #f0fdf4; }
svg.dag .node.st-Ready rect:first-of-type { stroke: #2563eb; fill: #eff6ff; }
svg.dag .node.st-Failed rect:first-of-type, svg.dag .node.st-Skipped rect:first-of-type { stroke: var(--bad); fill: #fef2f2; }
svg.dag .node.st-Blocked rect:first-of-type, svg.dag .node.st-Waiting rect:first-of-type { stroke: var(--warn); fill: #fffbeb; }
svg.dag .node { background: none; }
svg.dag .node-title { font-weight: 600; font-size: 13px; fill: var(--fg); }
svg.dag .node-state { font-size: 11px; fill: var(--muted); }
svg.dag .node-bar-bg { fill: #e5e7eb; }
svg.dag .node-bar { fill: var(--ok); }
svg.timeline { width: 100%; max-width: 900px; }
.tl-label { font-size: 12px; fill: var(--fg); }
.tl-track { stroke: #e5e7eb; }
.tl-bar { fill: #93c5fd; }
.tl-row.st-Succeeded .tl-bar { fill: #86efac; }
.tl-row.st-Failed .tl-bar, .tl-row.st-Skipped .tl-bar { fill: #fca5a5; }
.tl-mark { fill: #334155; }
.tl-mark.ev-StepStarved, .tl-mark.ev-StepBlocked { fill: var(--warn); }
.tl-mark.ev-StepFailed, .tl-mark.ev-StepSkipped { fill: var(--bad); }
.tl-mark.ev-StepSucceeded { fill: var(--ok); }
.tl-axis { font-size: 11px; fill: var(--muted); }
section.step, section.poisoned { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin-top: 14px; }
.field { margin-right: 6px; }
.field .k { color: var(--muted); }
table.events td { font-size: 12.5px; }
td.subject { color: var(--muted); }
form.filters { display: flex; gap: 12px; align-items: end; margin-bottom: 12px; flex-wrap: wrap; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
input, select { padding: 4px 6px; border: 1px solid #cbd5e1; border-radius: 4px; font: inherit; }
button { padding: 4px 12px; border: 1px solid #cbd5e1; border-radius: 4px; background: #fff; cursor: pointer; font: inherit; font-size: 13px; }
button:hover { background: #f1f5f9; }
button.danger { border-color: var(--bad); color: var(--bad); }
button.danger:hover { background: #fef2f2; }
button:disabled { opacity: 0.5; }
#flash { position: fixed; right: 16px; bottom: 16px; max-width: 480px; }
#flash.ok, #flash.error { padding: 10px 14px; border-radius: 6px; background: #111827; color: #fff; }
#flash.error { background: var(--bad); }
dialog { border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px; max-width: 480px; }
dialog menu { display: flex; justify-content: flex-end; gap: 8px; padding: 0; margin: 12px 0 0; }
dialog label { display: flex; flex-direction: column; gap: 4px; font-size: 12px; color: var(--muted); }
form.login { max-width: 360px; margin: 60px auto; background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 20px 24px; display: flex; flex-direction: column; gap: 12px; }
form.login label { display: flex; flex-direction: column; gap: 4px; }
`;

export const STYLE_CSS = asset(source);

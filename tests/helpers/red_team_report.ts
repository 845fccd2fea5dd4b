/**
 * The red team's attack x sandbox-mode table (docs/security.md "Red team"):
 * each outcome is recorded as it happens and the table is kept current in
 * `<storage>/redteam-report.md`, with the outcomes as JSON beside it
 * (`redteam-outcomes.json`) so that the tables of several processes (the
 * shards of bin/test_parallel.ts, each running some of the modes) merge
 * into one.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** The sandbox modes, in the table's column order (tests/helpers/red_team.ts SANDBOX_MODES). */
export const RED_TEAM_MODES = ['bubblewrap', 'unshare', 'docker'] as const
export type RedTeamModeName = (typeof RED_TEAM_MODES)[number]

/** attack -> mode -> cell, rows in the order the attacks were first recorded. */
export type RedTeamOutcomes = Record<string, Record<string, string>>

const REPORT = 'redteam-report.md'
const OUTCOMES = 'redteam-outcomes.json'

const outcomes: RedTeamOutcomes = {}

export function recordOutcome(storage: string, attack: string, mode: string, cell: string) {
  outcomes[attack] ??= {}
  outcomes[attack][mode] = cell.replace(/\s+/g, ' ').replace(/\|/g, '/').slice(0, 120)
  // Kept current after every attack, so an interrupted run still leaves its table.
  writeReport(storage, outcomes)
}

/** The attack x mode table as Markdown (modes that recorded nothing have no column). */
export function redTeamTable(recorded: RedTeamOutcomes = outcomes): string {
  const modes = RED_TEAM_MODES.filter((mode) =>
    Object.values(recorded).some((row) => row[mode] !== undefined)
  )
  return [
    `| attack | ${modes.join(' | ')} |`,
    `|---|${modes.map(() => '---').join('|')}|`,
    ...Object.entries(recorded).map(
      ([attack, row]) => `| ${attack} | ${modes.map((mode) => row[mode] ?? '-').join(' | ')} |`
    ),
  ].join('\n')
}

/** Writes the table (and its outcomes) to `<storage>/redteam-report.md`; answers the file. */
export function writeReport(storage: string, recorded: RedTeamOutcomes = outcomes): string {
  mkdirSync(storage, { recursive: true })
  const file = join(storage, REPORT)
  writeFileSync(
    file,
    `# Red team: attack x sandbox mode (${new Date().toISOString()})\n\n` +
      'Each cell: `refused (how)`, `SUCCEEDED (what)`, `n/a` (the target is not on this host) ' +
      'or `skipped` (the mode cannot run here).\n\n' +
      `${redTeamTable(recorded)}\n`
  )
  writeFileSync(join(storage, OUTCOMES), JSON.stringify(recorded, null, 2) + '\n')
  return file
}

export function hasOutcomes(): boolean {
  return Object.keys(outcomes).length > 0
}

/**
 * The outcomes recorded under each of `storages` as one table, written to
 * `<target>/redteam-report.md`; answers the table, or undefined when none
 * of them holds any.
 */
export function mergeReports(storages: string[], target: string): string | undefined {
  const merged: RedTeamOutcomes = {}
  for (const storage of storages) {
    const file = join(storage, OUTCOMES)
    if (!existsSync(file)) continue
    const recorded = JSON.parse(readFileSync(file, 'utf8')) as RedTeamOutcomes
    for (const [attack, row] of Object.entries(recorded)) {
      merged[attack] = { ...merged[attack], ...row }
    }
  }
  if (Object.keys(merged).length === 0) return undefined
  writeReport(target, merged)
  return redTeamTable(merged)
}

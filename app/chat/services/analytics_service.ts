import db from '@adonisjs/lucid/services/db'
import { utcDay } from '#chat/services/history_service'

export interface AnalyticsView {
  days: { date: string; messages: number }[]
  total: number
  peak: number
  avgPerDay: number
}

export const ANALYTICS_DAYS = 7

/**
 * GET /agents/:id/analytics: processed messages per UTC day for the last
 * 7 days including today (oldest first, days without messages as 0), from
 * the per-day counters: one primary-key range read, whatever the volume.
 */
export async function analyticsOf(agentId: string, now = new Date()): Promise<AnalyticsView> {
  const dates: string[] = []
  for (let back = ANALYTICS_DAYS - 1; back >= 0; back--) {
    dates.push(utcDay(new Date(now.getTime() - back * 24 * 60 * 60_000)))
  }
  const result = await db.rawQuery(
    `select to_char(day, 'YYYY-MM-DD') as date, messages from chat_daily_counts
      where agent_id = ? and day between ? and ?`,
    [agentId, dates[0], dates[dates.length - 1]]
  )
  const counts = new Map<string, number>(
    (result.rows as { date: string; messages: number }[]).map((row) => [row.date, row.messages])
  )
  const days = dates.map((date) => ({ date, messages: counts.get(date) ?? 0 }))
  const total = days.reduce((sum, day) => sum + day.messages, 0)
  return {
    days,
    total,
    peak: Math.max(...days.map((day) => day.messages)),
    avgPerDay: Math.round((total / ANALYTICS_DAYS) * 100) / 100,
  }
}

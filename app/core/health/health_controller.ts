import type { HttpContext } from '@adonisjs/core/http'
import healthService from '#core/health/health_service'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'

export default class HealthController {
  async handle(_ctx: HttpContext) {
    const report = await healthService.check()
    if (report.database !== 'ok') throw new ServiceUnavailableException('Database unreachable')
    if (!report.healthy) throw new ServiceUnavailableException('Database migrations are pending')
    return {
      status: 'ok',
      database: report.database,
      migrations: report.migrations,
      uptimeSecs: report.uptimeSecs,
    }
  }
}

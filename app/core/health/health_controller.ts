import type { HttpContext } from '@adonisjs/core/http'
import healthService from '#core/health/health_service'
import { ServiceUnavailableException } from '#core/exceptions/api_exceptions'

export default class HealthController {
  /**
   * @handle
   * @summary Service health
   * @description 200 once the database answers and migrations are applied; 503 otherwise. No credential needed.
   * @responseBody 200 - {"success":true,"data":{"status":"ok","database":"ok","migrations":"applied","uptimeSecs":12}}
   * @responseBody 503 - {"success":false,"error":"Database unreachable","code":"SERVER_ERROR"}
   */
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

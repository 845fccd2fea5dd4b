import type { HttpContext } from '@adonisjs/core/http'
import openApiService from '#core/openapi/openapi_service'
import { NotFoundException } from '#core/exceptions/api_exceptions'

export default class OpenApiController {
  /**
   * @document
   * @summary OpenAPI document
   * @description The machine-readable description of every route (OpenAPI 3.1), generated from the live router, controller annotations, validators and models. Not wrapped in the envelope. No credential needed.
   * @tag docs
   */
  async document({ response }: HttpContext) {
    // Sent as a string so the envelope middleware leaves the document as it is.
    response.header('content-type', 'application/json; charset=utf-8')
    return response.send(await openApiService.document())
  }

  /**
   * @explorer
   * @summary Interactive API explorer
   * @description Swagger UI over /openapi.json; its files are served by this service, so it works offline. No credential needed.
   * @tag docs
   */
  async explorer({ response }: HttpContext) {
    response.header('content-type', 'text/html; charset=utf-8')
    return response.send(openApiService.explorerPage())
  }

  /**
   * @asset
   * @summary Explorer file
   * @description Stylesheet, scripts and icon of the explorer (from swagger-ui-dist).
   * @paramPath file - File name, e.g. swagger-ui.css - @type(string) @required
   * @tag docs
   */
  async asset({ params, response }: HttpContext) {
    const asset = openApiService.explorerAsset(params.file)
    if (!asset) throw new NotFoundException(`No explorer file "${params.file}"`)
    response.header('content-type', asset.contentType)
    response.header('cache-control', 'public, max-age=86400')
    return response.download(asset.path)
  }
}

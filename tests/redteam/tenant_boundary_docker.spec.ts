import { redTeamGroup } from '#tests/helpers/red_team_attacks'

// The tenant-boundary attacks on the docker sandbox mode (tests/helpers/red_team_attacks.ts).
redTeamGroup('docker')

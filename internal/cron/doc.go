// Package cron parses cron expressions and computes their fire times, forward
// and backward, in any time zone and across daylight-saving transitions.
//
// # Syntax
//
// An expression has five fields separated by blanks:
//
//	minute        0-59
//	hour          0-23
//	day of month  1-31
//	month         1-12 or JAN-DEC
//	day of week   0-7 or SUN-SAT (0 and 7 are Sunday)
//
// A field is a comma-separated list of elements. An element is * (every
// value of the field), a value, or a range a-b with a <= b, optionally
// followed by a step /n: */n takes every n-th value from the first, a-b/n
// every n-th value from a to b, a/n every n-th value from a to the end of
// the field. A step runs from 1 to the number of values of the field (60 for
// minutes, 7 for days of the week). Names are case-insensitive.
//
// A field is a wildcard when it is written * or */n. As in Vixie cron, when
// neither the day-of-month nor the day-of-week field is a wildcard, a day
// matches if either field matches: "0 0 1,15 * MON" fires on the 1st, on the
// 15th and on every Monday. Otherwise a day must match both: "0 0 * * MON"
// fires on Mondays, "0 0 */2 * MON" on the Mondays with an odd day of month.
//
// The macros stand for five fields: @yearly and @annually for "0 0 1 1 *",
// @monthly for "0 0 1 * *", @weekly for "0 0 * * 0", @daily and @midnight
// for "0 0 * * *", @hourly for "0 * * * *".
//
// A prefix CRON_TZ=Zone (or TZ=Zone) names the time zone by its IANA name,
// as in "CRON_TZ=Europe/Berlin 0 2 * * *", and overrides the location given
// to [Parse].
//
// [Parse] refuses an expression that can never fire, such as "0 0 30 2 *" or
// "0 0 31 4,6 *", instead of leaving a search to discover it. February 29 is
// allowed: it fires in leap years. Every error names the field and its text,
// as in
//
//	cron: hour field "25": 25 is out of range 0-23
//
// # Fire times and daylight-saving time
//
// An expression matches wall times: local dates and clock times, to the
// minute. Where the clock is set forward some wall times never occur, and
// where it is set back some occur twice. The hour field decides what happens
// then:
//
//   - When the hour field is a wildcard (* or */n), the schedule fires at
//     every instant whose wall time matches. A skipped wall time does not
//     fire and a repeated one fires twice: "0 * * * *" fires 23 times on New
//     York's 2026-03-08 (there is no 02:00) and 25 times on 2026-11-01 (01:00
//     EDT, then 01:00 EST), and "*/5 * * * *" fires every five minutes of
//     real time, throughout.
//   - Otherwise (fixed hours, such as "0 2 * * *" or "30 1,13 * * *") the
//     schedule fires once for each matching wall time. A wall time that
//     occurs twice fires at its first occurrence only: "30 1 * * *" fires at
//     01:30 EDT on 2026-11-01, not again at 01:30 EST. A wall time skipped
//     by the clock set forward fires at the first instant after the gap:
//     "30 2 * * *" fires at 03:00 EDT on 2026-03-08, and so do "0,30 2 * * *"
//     and "0 2,3 * * *", once each. So a schedule with one fixed time of day
//     fires exactly once on every local day it matches.
//
// The rule follows how the hour field is written, not its values:
// "0 0-23 * * *" fires once per matching wall time.
//
// Fire times fall on whole minutes of wall time, and their wall times match
// the expression, except a fire after a gap: its wall time is where the clock
// lands (03:00 in New York, 02:30 on Lord Howe Island).
//
// # Excluded dates
//
// [Schedule.Exclude] removes whole local dates, such as public holidays: no
// wall time on an excluded date matches. Used as a partition scheme, the slot
// that closes at the next fire time then covers the excluded days, so no time
// is lost.
//
// # Searching
//
// [Schedule.Next] returns the first fire time strictly after an instant and
// [Schedule.Prev] the last at or before it. Both start at the instant and
// search outward, hour by hour within the day and month by month beyond it,
// so enumerating fire times newest first costs the same as oldest first, and
// neither allocates.
//
// A search is bounded. Calendars repeat every 400 years, and in that cycle a
// schedule that Parse accepts matches a day at least once every 40 years: the
// longest gap is that of February 29 on one weekday across a non-leap
// century year, as "0 0 29 2 */7" (February 29 falling on a Sunday) fires in
// 2088 and next in 2128. A search therefore covers at most 41 calendar
// years, plus 41 more for each excluded date (each can remove one matching
// day), so it never gives up on a schedule that fires, and it visits each
// month of the schedule at most once, so even the longest gap costs a few
// hundred steps. Next and Prev return the zero [time.Time] only for the
// zero Schedule and for instants more than about 142 million years from
// 1970.
package cron

"""JUnit XML: one testsuite per host, one testcase per check (unique names)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dflash_doctor.render.text import clean
from dflash_doctor.report import Report, gates


def render_junit(report: Report) -> str:
    suites = ET.Element("testsuites", name="dflash-doctor")
    total = failures = errors = skipped = 0
    for host in report.hosts:
        suite = ET.SubElement(suites, "testsuite", name=f"dflash-doctor {host.host}")
        cases = fails = errs = skips = 0
        if not host.reachable:
            case = ET.SubElement(
                suite, "testcase", classname=f"dflash_doctor.{host.host}", name="host reachable"
            )
            ET.SubElement(case, "error", message=host.error or "unreachable", type="unreachable")
            cases += 1
            errs += 1
        for result in host.results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"dflash_doctor.{host.host}",
                name=f"{result.check_id} {result.name}",
            )
            cases += 1
            gating = [f for f in result.findings if gates(f, report.fail_on)]
            if result.status == "skipped":
                ET.SubElement(case, "skipped", message=result.reason or "skipped")
                skips += 1
            elif gating:
                fails += 1
                body = "\n\n".join(
                    f"{f.severity.value}: {f.title}\n{f.message}\n"
                    + "\n".join(f"  {e.file or e.kind}:{e.line or ''} {e.text}" for e in f.evidence)
                    + "".join(f"\n  fix: {x.describe()}" for x in f.fixes)
                    for f in gating
                )
                failure = ET.SubElement(
                    case, "failure", message=gating[0].title, type=gating[0].severity.value
                )
                failure.text = body
            elif result.findings:
                out = ET.SubElement(case, "system-out")
                out.text = "\n".join(
                    f"{f.severity.value}: {f.title}"
                    + (f" ({f.suppressed})" if f.suppressed else "")
                    for f in result.findings
                )
        suite.set("tests", str(cases))
        suite.set("failures", str(fails))
        suite.set("errors", str(errs))
        suite.set("skipped", str(skips))
        total, failures, skipped = total + cases, failures + fails, skipped + skips
        errors += errs
    suites.set("tests", str(total))
    suites.set("failures", str(failures))
    suites.set("errors", str(errors))
    suites.set("skipped", str(skipped))
    ET.indent(suites)
    # Control characters from host text are not XML 1.0: a CI parser would reject the file.
    return clean(ET.tostring(suites, encoding="unicode", xml_declaration=True)) + "\n"

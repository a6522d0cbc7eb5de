"""TREC topics (Robust04's format) read into titles and descriptions, and `t5rank topics`."""

from __future__ import annotations

import gzip

import pytest

from t5rank.cli import main
from t5rank.data.readers import InputFormatError, Topic, read_queries, read_trec_topics

# Two topics as the Robust04 topic file writes them (tags not closed, labels, wrapped lines), and a
# third with closed tags and no narrative.
TOPICS = """\
<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal
activity, the activity, and, if possible, collaborating organizations
and the countries involved.

<narr> Narrative:
A relevant document must as a minimum identify the organization and the
type of illegal activity (e.g., Columbian cartel exporting cocaine).
</top>

<top>
<num> Number: 302
<title> Poliomyelitis and Post-Polio

<desc> Description:
Is the disease of Poliomyelitis (polio) under control in the
world?

<narr> Narrative:
Relevant documents should contain data or outbreaks of the polio disease.
</top>
<top><num>303</num><title>Hubble Telescope Achievements</title>
<desc>Identify positive accomplishments of the Hubble telescope since it was launched.</desc></top>
"""


def test_read_trec_topics_titles_descriptions_narratives(tmp_path):
  path = tmp_path / "topics.txt"
  path.write_text(TOPICS)
  topics = read_trec_topics(str(path))
  assert list(topics) == ["301", "302", "303"]
  assert topics["301"] == Topic(
      title="International Organized Crime",
      description="Identify organizations that participate in international criminal activity, "
                  "the activity, and, if possible, collaborating organizations and the countries "
                  "involved.",
      narrative="A relevant document must as a minimum identify the organization and the type of "
                "illegal activity (e.g., Columbian cartel exporting cocaine).")
  assert topics["302"].description == ("Is the disease of Poliomyelitis (polio) under control in "
                                       "the world?")
  assert topics["303"] == Topic("Hubble Telescope Achievements", "Identify positive accomplishments "
                                "of the Hubble telescope since it was launched.")
  gz = tmp_path / "topics.txt.gz"
  gz.write_bytes(gzip.compress(TOPICS.encode()))
  assert read_trec_topics(str(gz)) == topics


@pytest.mark.parametrize("text, message", [
    ("no topics here\n", "no <top> ... </top> topic found"),
    ("<top>\n<num> Number: 1\n<title> A\n</top>\n\n<top>\n<num> Number: 1\n<title> B\n</top>\n",
     ":6: duplicate topic number '1'"),
    ("\n<top>\n<num> Number: 7\n<desc> Description: no title\n</top>\n",
     ":2: a topic needs <num> and <title>; found ['desc', 'num']"),
])
def test_bad_topic_files_name_the_file_and_line(tmp_path, text, message):
  path = tmp_path / "bad.topics"
  path.write_text(text)
  with pytest.raises(InputFormatError, match=f"^{path}") as error:
    read_trec_topics(str(path))
  assert message in str(error.value)


def test_topics_command_writes_title_and_description_queries(tmp_path, capsys):
  (tmp_path / "topics.txt").write_text(TOPICS)
  titles, descriptions = str(tmp_path / "titles.tsv"), str(tmp_path / "desc.tsv")
  assert main(["topics", str(tmp_path / "topics.txt"), "--field", "title", "--output", titles]) == 0
  assert main(["topics", str(tmp_path / "topics.txt"), "--field", "description",
               "--output", descriptions]) == 0
  assert read_queries(titles) == {"301": "International Organized Crime",
                                  "302": "Poliomyelitis and Post-Polio",
                                  "303": "Hubble Telescope Achievements"}
  assert read_queries(descriptions)["302"] == ("Is the disease of Poliomyelitis (polio) under "
                                               "control in the world?")
  assert "wrote the titles of 3 topics" in capsys.readouterr().out
  with pytest.raises(SystemExit, match="1 topic\\(s\\) of .* have no narrative: 303"):
    main(["topics", str(tmp_path / "topics.txt"), "--field", "narrative",
          "--output", str(tmp_path / "narr.tsv")])

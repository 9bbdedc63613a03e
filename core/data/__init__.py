"""Result files and the papers' input readers: records, topics, debates, questions, CompQA files."""
